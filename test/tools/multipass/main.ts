/** Entry point of the Multipass stand-in CLI (run by `bin/multipass`); see standin.ts. */
import { main } from "./standin";

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`multipass stand-in: ${String(err)}\n`);
    process.exitCode = 2;
  },
);
