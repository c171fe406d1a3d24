/**
 * What `tock worker --handlers <module>` (and `tock dev --handlers`) loads: an application's module
 * of handlers and of jobs defined in code, with the handlers of a worker configuration file beside
 * them. A module may export, in any mix:
 * - handlers by name, as today: `export default { name: (ctx) => … }` or `export const handlers = { … }`;
 * - job definitions (`defineJob`): `export default [a, b]`, `export default a`, named exports
 *   (`export const report = defineJob(…)`), a named list (`export const jobs = [a, b]`), or values
 *   of the handlers object. Each definition counts once, however many exports name it.
 * Every name is served once: a handler name defined twice is refused before anything starts.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type JobInput, ValidationError, validateId } from '../core/index.js';
import {
  type Handler,
  isJobDefinition,
  type JobDefinition,
  readWorkerConfig,
  servingDefinitions,
} from '../worker/index.js';

/** A module's (and a configuration file's) handlers, and the jobs its definitions upsert. */
export interface LoadedHandlers {
  handlers: Record<string, Handler>;
  /** The jobs of the module's definitions, in the order found; empty when it defines none. */
  jobs: JobInput[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const isDefinitionList = (value: unknown): value is JobDefinition[] =>
  Array.isArray(value) && value.length > 0 && value.every(isJobDefinition);

/** The module's handlers object (`default`, else `handlers`) and every definition it exports. */
function exportsOf(mod: Record<string, unknown>, file: string) {
  const found = new Set<JobDefinition>();
  const add = (value: unknown) => {
    if (isJobDefinition(value)) found.add(value);
    else if (isDefinitionList(value)) for (const d of value) found.add(d);
  };
  for (const value of Object.values(mod)) add(value);
  if (Array.isArray(mod.default) && !isDefinitionList(mod.default))
    throw new ValidationError(
      `handlers module ${file}: its default export is a list of something other than job definitions (defineJob)`,
    );
  const byName = [mod.default, mod.handlers].find((v) => isPlainObject(v) && !isJobDefinition(v));
  const handlers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries((byName as Record<string, unknown> | undefined) ?? {})) {
    if (isJobDefinition(value)) found.add(value);
    else handlers[name] = value;
  }
  return { handlers, definitions: [...found] };
}

/**
 * Imports a handlers module (resolved against `cwd`): its handlers by name and its job definitions
 * (see the module's header). A module with neither is refused.
 */
export async function importHandlers(spec: string, cwd = process.cwd()): Promise<LoadedHandlers> {
  const file = path.resolve(cwd, spec);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(
      `cannot load handlers module ${file}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const { handlers, definitions } = exportsOf(mod, file);
  const entries = Object.entries(handlers);
  if (entries.length === 0 && definitions.length === 0) {
    throw new ValidationError(
      `handlers module ${file} must export handlers by name (\`export default { name: (ctx) => … }\` or \`export const handlers = { … }\`) or job definitions (\`export default [defineJob({ … })]\`)`,
    );
  }
  for (const [name, fn] of entries) {
    try {
      validateId(name, `handler name "${name}"`);
    } catch (err) {
      throw new ValidationError(`handlers module ${file}: ${(err as Error).message}`);
    }
    if (typeof fn !== 'function')
      throw new ValidationError(`handlers module ${file}: handler "${name}" is not a function`);
  }
  try {
    return servingDefinitions(definitions, handlers as Record<string, Handler>);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(`handlers module ${file}: ${err.message}`);
    throw err;
  }
}

/** The handlers of the module and of the configuration file together; a name in both is refused. */
export async function loadHandlers(o: {
  handlersModule?: string;
  configFile?: string;
  cwd?: string;
}): Promise<LoadedHandlers> {
  if (!o.handlersModule && !o.configFile)
    throw new ValidationError('tock worker needs handlers: --handlers <module>, --config <file>, or both');
  const cwd = o.cwd ?? process.cwd();
  const fromModule = o.handlersModule
    ? await importHandlers(o.handlersModule, cwd)
    : { handlers: {}, jobs: [] };
  const fromConfig = o.configFile ? await readWorkerConfig(path.resolve(cwd, o.configFile)) : {};
  for (const name of Object.keys(fromConfig)) {
    if (Object.hasOwn(fromModule.handlers, name))
      throw new ValidationError(
        `handler "${name}" is defined twice: in ${o.handlersModule} and in ${o.configFile}`,
      );
  }
  return { handlers: { ...fromModule.handlers, ...fromConfig }, jobs: fromModule.jobs };
}
