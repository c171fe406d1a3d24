/** Who is signed in, and what the key may do: pages show a write button only when `can('operate')`. */
import type { Permission, WhoAmI } from './types.js';

export interface Session {
  who: WhoAmI;
  can: (p: Permission) => boolean;
}

export function session(who: WhoAmI): Session {
  return { who, can: (p) => who.permissions.includes(p) };
}
