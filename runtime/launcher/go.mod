module cohort-lab.dev/launcher

go 1.26
