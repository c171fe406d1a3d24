/**
 * The limits routes: create or replace, read, list and delete the caller's tenant's named limits
 * (`PUT/GET/DELETE /v1/limits/{key}`, `GET /v1/limits`). Reading needs `read`, writing `operate`,
 * except the tenant's own key `tenant:<tenant>`, which needs `admin`: an operator must not lift the
 * limit its tenant was given. Jobs' own caps (`job:…`) are not limits an operator writes.
 */
import { allows, keyOfRole, TockError, tenantKey } from '../../core/index.js';
import * as L from '../limit-schemas.js';
import { limitJson, limitStateJson } from '../present.js';
import * as S from '../schemas.js';
import type { Principal, RouteApp, RouteOptions, RoutePlugin } from '../types.js';
import { errors, limitOf } from './shared.js';

/** The limits routes, in the order the OpenAPI document lists them. */
export const limitRoutes: RoutePlugin = async (app, o) => {
  putLimit(app, o);
  readLimits(app, o);
  deleteLimit(app, o);
};

/** Writing the tenant's own limit needs `admin` (the route's `operate` lets the rest through). */
function checkWrite(principal: Principal, key: string): void {
  if (key === tenantKey(principal.tenantId) && !allows(principal.role, 'admin')) {
    throw new TockError(
      'forbidden',
      `${keyOfRole(principal.role)} may not change the tenant's own limit "${key}": that needs an admin key`,
      { key },
    );
  }
}

function putLimit(app: RouteApp, { store, clock }: RouteOptions): void {
  app.put(
    '/v1/limits/:key',
    {
      config: { permission: 'operate' },
      schema: {
        summary:
          'Create or replace a limit (201 when created, 200 when replaced); `tenant:<tenant>` needs an admin key',
        tags: ['limits'],
        params: L.LimitParams,
        body: L.LimitBody,
        response: { 200: L.Limit, 201: L.Limit, ...errors },
      },
    },
    async (request, reply) => {
      const { key } = request.params;
      checkWrite(request.principal, key);
      const { rate, burst, max_concurrency } = request.body;
      const { limit, created } = await store.putLimit({
        tenantId: request.principal.tenantId,
        key,
        limit: { rate, burst, maxConcurrency: max_concurrency },
        now: clock.nowMs(),
      });
      return reply.code(created ? 201 : 200).send(limitJson(limit));
    },
  );
}

/** `GET /v1/limits` and `GET /v1/limits/:key`. */
function readLimits(app: RouteApp, { store, clock }: RouteOptions): void {
  app.get(
    '/v1/limits',
    {
      config: { permission: 'read' },
      schema: {
        summary: "List the tenant's limits, by key, each with the runs it holds back",
        tags: ['limits'],
        querystring: S.ListQuery,
        response: { 200: L.LimitList, ...errors },
      },
    },
    async (request) => {
      const page = await store.listLimits({
        tenantId: request.principal.tenantId,
        limit: limitOf(request.query),
        cursor: request.query.cursor ?? null,
        now: clock.nowMs(),
      });
      return { limits: page.items.map(limitStateJson), next_cursor: page.nextCursor };
    },
  );

  app.get(
    '/v1/limits/:key',
    {
      config: { permission: 'read' },
      schema: {
        summary: 'One limit, with its tokens now, the slots in use and the runs it holds back',
        tags: ['limits'],
        params: L.LimitParams,
        response: { 200: L.LimitState, ...errors },
      },
    },
    async (request) =>
      limitStateJson(
        await store.getLimit({
          tenantId: request.principal.tenantId,
          key: request.params.key,
          now: clock.nowMs(),
        }),
      ),
  );
}

function deleteLimit(app: RouteApp, { store }: RouteOptions): void {
  app.delete(
    '/v1/limits/:key',
    {
      config: { permission: 'operate' },
      schema: {
        summary: 'Delete a limit (409 while a job lists it); runs holding its slots keep them until they end',
        tags: ['limits'],
        params: L.LimitParams,
        response: { 204: S.NoContent, ...errors },
      },
    },
    async (request, reply) => {
      const { key } = request.params;
      checkWrite(request.principal, key);
      await store.deleteLimit({ tenantId: request.principal.tenantId, key });
      return reply.code(204).send(null);
    },
  );
}
