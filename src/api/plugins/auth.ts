/**
 * Who may make a request. A route's `config.permission` says what it needs (routes without one are
 * public: health, readiness, OpenAPI). With keys, the bearer key is looked up and its tenant and
 * role become `request.principal`; in open mode every request is a cluster-admin of the open
 * tenant. A role without the permission is refused with 403 before the body is read. A caller
 * refused for its key may still be sending a body: the refusal closes the connection rather than
 * read (and wait for) the rest of it.
 *
 * Added to the root instance (not an encapsulated plugin) so that every route module inherits it.
 */
import type { FastifyReply } from 'fastify';
import { allows, keyOfRole, type Permission } from '../../core/index.js';
import type { Store } from '../../store/index.js';
import type { App, Principal } from '../types.js';
import { envelope } from './errors.js';

/** What each permission lets a key do, for the 403 message. */
const DOING: Record<Permission, string> = {
  read: 'read',
  operate: 'operate',
  work: 'work runs',
  admin: 'manage API keys',
  cluster: 'read cluster-wide facts (a cluster-admin key is needed)',
};

/**
 * `keys`: every /v1 request (and /metrics) needs `Authorization: Bearer <key>`. `open`: no keys,
 * every request acts as a cluster-admin of the open tenant.
 */
export type AuthMode = 'keys' | 'open';

export interface AuthOptions {
  auth: AuthMode;
  /** Tenant of open mode. Default `default`. */
  openTenant?: string;
  store: Pick<Store, 'authenticate'>;
}

const refuse = (reply: FastifyReply, status: 401 | 403, code: string, message: string) =>
  reply.code(status).header('connection', 'close').send(envelope(code, message));

/** Decorates requests with `principal` and adds the `onRequest` hook that sets and checks it. */
export function addAuth(app: App, o: AuthOptions): void {
  // Set by the hook below on every route with a permission before anything reads it.
  app.decorateRequest('principal', undefined as unknown as Principal);
  app.addHook('onRequest', async (request, reply) => {
    const permission = request.routeOptions.config.permission;
    if (!permission) return;
    if (o.auth === 'open') {
      request.principal = { tenantId: o.openTenant ?? 'default', role: 'cluster-admin', keyId: null };
    } else {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? /^Bearer ([^\s]+)$/i.exec(header) : null;
      if (!match) {
        return refuse(reply, 401, 'unauthorized', 'an API key is required: Authorization: Bearer <key>');
      }
      const key = await o.store.authenticate(match[1]!);
      if (!key) return refuse(reply, 401, 'unauthorized', 'the API key is unknown or revoked');
      request.principal = { tenantId: key.tenantId, role: key.role, keyId: key.keyId };
    }
    if (!allows(request.principal.role, permission)) {
      return refuse(
        reply,
        403,
        'forbidden',
        `${keyOfRole(request.principal.role)} may not ${DOING[permission]}`,
      );
    }
  });
}
