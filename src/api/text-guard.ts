/**
 * Refuses a request whose body, query string or path parameters hold text PostgreSQL cannot store
 * (U+0000 or an unpaired surrogate, in a value or a key) or a number JSON cannot carry (`1e309`
 * parses to Infinity): 400 `validation_error` naming the field, before any route runs, so no
 * route can reach the database with it (where it would be a 500, or a silent `null`). Fastify's
 * JSON parser turns `"\u0000"` in JSON text into a NUL string, so the check is on the parsed
 * values. A handler's result reaches the database through the worker, which sanitises instead
 * (docs/architecture.md, "Text PostgreSQL refuses").
 */
import type { FastifyRequest } from 'fastify';
import { badTextAt, describeBadText, ValidationError } from '../core/index.js';

/**
 * A `preValidation` hook. The field is named as a path into the body (`payload.a[2].b`,
 * `jobs[0].payload.x`, `output`), or by the query or path parameter's name.
 */
export async function refuseUnstorableText(request: FastifyRequest): Promise<void> {
  for (const part of [request.params, request.query, request.body]) {
    const bad = badTextAt(part);
    if (bad) throw new ValidationError(describeBadText(bad), { field: bad.path });
  }
}
