/**
 * The console's answer types (src/console/types.ts: the fields it shows) are a part of the client's
 * (src/client/types.ts, derived from the API's answer tables): a field the API renames, retypes or
 * drops fails here. The check is the type-check `npm run lint` runs over the tests (tsc: `true` is
 * not a `false`); at run time the test only reads the list.
 */
import { expect, test } from 'vitest';
import type * as Api from '../../src/client/types.js';
import type * as Console from '../../src/console/types.js';

/** `true` when every `From` is a `To`: what the API answers is what the console reads. */
type Reads<From, To> = [From] extends [To] ? true : false;

test("every answer the console reads is a part of the client's type of it", () => {
  const reads: [
    Reads<Api.WhoAmI, Console.WhoAmI>,
    Reads<Api.Job, Console.Job>,
    Reads<Api.Run, Console.Run>,
    Reads<Api.RunWithAttempts, Console.RunWithAttempts>,
    Reads<Api.JobList, Console.JobList>,
    Reads<Api.RunList, Console.RunList>,
    Reads<Api.StatusAnswer, Console.Status>,
    Reads<Api.DelayAnswer, Console.DelayAnswer>,
    Reads<Api.LimitList, Console.LimitList>,
  ] = [true, true, true, true, true, true, true, true, true];
  expect(reads.every(Boolean)).toBe(true);
});
