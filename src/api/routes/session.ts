/**
 * `GET /v1/whoami`: who the caller's key is (its tenant, role and what the role may do), so that a
 * client such as the web console can show the tenant and offer only the actions the key allows. It
 * needs only `read`; a key of the `worker` role (which may not read) is told who it is by the 403.
 * In open mode (`tock dev`, `--insecure`) it answers the open tenant's cluster-admin with `auth`
 * `open`: no key is needed.
 */
import { type Static, Type } from 'typebox';
import { allows, type Permission } from '../../core/index.js';
import type { RoutePlugin } from '../types.js';
import { errors } from './shared.js';

const PERMISSIONS: readonly Permission[] = ['read', 'operate', 'work', 'admin', 'cluster'];

export const WhoAmI = Type.Object({
  tenant_id: Type.String({ description: "the key's tenant (open mode: the open tenant)" }),
  role: Type.String({ description: 'cluster-admin, admin, operator, worker or reader' }),
  key_id: Type.Union([Type.String(), Type.Null()], { description: 'the key; null in open mode' }),
  auth: Type.Union([Type.Literal('keys'), Type.Literal('open')], {
    description: 'keys: requests need a key; open: no key (tock dev, tock server --insecure)',
  }),
  permissions: Type.Array(Type.String(), {
    description: 'what the role may do: read, operate (jobs and runs), work, admin (keys), cluster',
  }),
});

export const sessionRoutes: RoutePlugin = async (app) => {
  app.get(
    '/v1/whoami',
    {
      config: { permission: 'read' },
      schema: {
        summary: "The caller's tenant, role and permissions (open mode: the open tenant's cluster-admin)",
        tags: ['keys'],
        response: { 200: WhoAmI, ...errors },
      },
    },
    async (request): Promise<Static<typeof WhoAmI>> => {
      const { tenantId, role, keyId } = request.principal;
      return {
        tenant_id: tenantId,
        role,
        key_id: keyId,
        auth: keyId === null ? 'open' : 'keys',
        permissions: PERMISSIONS.filter((p) => allows(role, p)),
      };
    },
  );
};
