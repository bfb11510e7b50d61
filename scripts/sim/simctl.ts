/**
 * State compatibility only: `sim` stacks created before simctl moved to simctl/main.ts store this path in the
 * delete (and create) steps of their control-plane Commands; `pulumi destroy` of such a stack runs it. The next
 * `pulumi up` stores the new path. Forwards to simctl/main.ts; no code of its own.
 */
import "../../simctl/main";
