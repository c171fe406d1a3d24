/**
 * The keys routes: create, list and revoke a tenant's API keys (admin only). A cluster-admin key is
 * listed like any key (never its secret) but revoked only by a caller with the `cluster` permission.
 */
import { API_ROLES, keyOfRole, TockError } from '../../core/index.js';
import { keyJson } from '../present.js';
import * as S from '../schemas.js';
import type { RoutePlugin } from '../types.js';
import { errors } from './shared.js';

export const keyRoutes: RoutePlugin = async (app, { store, clock }) => {
  app.post(
    '/v1/keys',
    {
      config: { permission: 'admin' },
      schema: {
        summary: "Create a key for the caller's tenant; the secret is shown once",
        tags: ['keys'],
        body: S.KeyBody,
        response: { 201: S.CreatedKey, ...errors },
      },
    },
    async (request, reply) => {
      const { role, name } = request.body;
      // The schema admits these roles only; checked again so that no later schema change lets an
      // API key mint a key above its tenant's scope (cluster-admin).
      if (!API_ROLES.some((r) => r === role))
        throw new TockError(
          'forbidden',
          `${keyOfRole(role)} can only be made with tock keys create on the database`,
        );
      const { key, secret } = await store.createApiKey({
        tenantId: request.principal.tenantId,
        role,
        name,
        now: clock.nowMs(),
      });
      return reply.code(201).send({ ...keyJson(key), key: secret });
    },
  );

  app.get(
    '/v1/keys',
    {
      config: { permission: 'admin' },
      schema: {
        summary: "The tenant's keys (never their secrets)",
        tags: ['keys'],
        response: { 200: S.KeyList, ...errors },
      },
    },
    async (request) => ({
      keys: (await store.listApiKeys({ tenantId: request.principal.tenantId })).map(keyJson),
    }),
  );

  app.delete(
    '/v1/keys/:key_id',
    {
      config: { permission: 'admin' },
      schema: {
        summary: 'Revoke a key',
        tags: ['keys'],
        params: S.KeyParams,
        response: { 200: S.ApiKey, ...errors },
      },
    },
    async (request) =>
      keyJson(
        // A cluster-admin key can only be revoked by a caller with the cluster permission (the store
        // checks the key's role and refuses with 403 forbidden, changing nothing).
        await store.revokeApiKey({
          tenantId: request.principal.tenantId,
          keyId: request.params.key_id,
          now: clock.nowMs(),
          by: request.principal.role,
        }),
      ),
  );
};
