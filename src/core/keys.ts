/**
 * API keys and roles. A key is `tock_` followed by 32 random bytes (base64url); only its SHA-256
 * is stored, so a key is shown once, at creation. Each key belongs to one tenant and has one role.
 * Every role but `cluster-admin` acts inside its tenant only; `cluster-admin` is an admin of its
 * tenant that may also read cluster-wide facts (permission `cluster`: every tenant's nodes, the
 * shards, the global backlog, `/metrics`). Only the database-connected `tock keys create` makes
 * one: the API creates keys of `API_ROLES` only, so no API key can mint a key above its tenant.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ValidationError } from './errors.js';

export const ROLES = ['cluster-admin', 'admin', 'operator', 'worker', 'reader'] as const;
export type Role = (typeof ROLES)[number];

/** The roles `POST /v1/keys` may create: every role scoped to one tenant (not `cluster-admin`). */
export const API_ROLES = ['admin', 'operator', 'worker', 'reader'] as const satisfies readonly Role[];
export type ApiRole = (typeof API_ROLES)[number];

/** What a route needs. `cluster`: facts about every tenant and the cluster itself. */
export type Permission = 'read' | 'operate' | 'work' | 'admin' | 'cluster';

const GRANTS: Record<Role, readonly Permission[]> = {
  'cluster-admin': ['read', 'operate', 'work', 'admin', 'cluster'],
  admin: ['read', 'operate', 'work', 'admin'],
  operator: ['read', 'operate'],
  worker: ['work'],
  reader: ['read'],
};

export function parseRole(value: string): Role {
  if ((ROLES as readonly string[]).includes(value)) return value as Role;
  throw new ValidationError(`role "${value}" is not one of ${ROLES.join(', ')}`, { field: 'role' });
}

/** `an operator key`, `a reader key`: a role's key in a sentence, with the right article. */
export function keyOfRole(role: string): string {
  return `${/^[aeiou]/i.test(role) ? 'an' : 'a'} ${role} key`;
}

export function allows(role: Role, permission: Permission): boolean {
  return GRANTS[role].includes(permission);
}

export const KEY_PREFIX = 'tock_';

/** A new secret and its public id (shown in listings; the secret is not). */
export function newApiKey(): { keyId: string; secret: string } {
  return {
    keyId: `key_${randomBytes(6).toString('hex')}`,
    secret: `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`,
  };
}

/** What is stored and looked up: the SHA-256 of the secret, hex. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}
