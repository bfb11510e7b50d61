import { describe, expect, it } from "vitest";
import { expandEnv, expandVars, referencedVars } from "../../runtime/core/expand";

const vars = { COHORT_PORT: "40123", COHORT_MEMBER_DIR: "/runs/r1/members/api-0", EMPTY: "" };

describe("expandVars (Kubernetes $(VAR) semantics)", () => {
  it.each([
    ["--port=$(COHORT_PORT)", "--port=40123"],
    ["$(COHORT_MEMBER_DIR)/state", "/runs/r1/members/api-0/state"],
    ["$(COHORT_PORT)$(COHORT_PORT)", "4012340123"],
    ["[$(EMPTY)]", "[]"],
    ["$(UNDEFINED) stays", "$(UNDEFINED) stays"],
    ["$$(COHORT_PORT) is escaped", "$(COHORT_PORT) is escaped"],
    ["$$$(COHORT_PORT)", "$40123"],
    ["$$", "$"],
    ["cost: 5$", "cost: 5$"],
    ["$COHORT_PORT and ${COHORT_PORT} are shell syntax", "$COHORT_PORT and ${COHORT_PORT} are shell syntax"],
    ["unclosed $(COHORT_PORT", "unclosed $(COHORT_PORT"],
    ["$()", "$()"],
  ])("%j -> %j", (input, output) => {
    expect(expandVars(input, vars)).toBe(output);
  });

  it("lists referenced names, skipping escaped ones", () => {
    expect(referencedVars("a $(X) $$(Y) $(Z) $(X)")).toEqual(["X", "Z", "X"]);
  });

  it("expands env in declaration order: earlier entries and base are visible, later ones are not", () => {
    const env = expandEnv({ COHORT_PORT: "1" }, { A: "$(COHORT_PORT)-a", B: "$(A)-b", C: "$(D)-c", D: "d" });
    expect(env).toEqual({ COHORT_PORT: "1", A: "1-a", B: "1-a-b", C: "$(D)-c", D: "d" });
  });
});
