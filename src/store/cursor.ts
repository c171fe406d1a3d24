/**
 * Page cursors: the parts of the last row of a page (a job id; a slot and a run id; a role, a start
 * and a node id) as base64url JSON. Opaque to callers, who may forge them: a decoded cursor is
 * checked part by part by the list that reads it.
 */
import { badTextAt, ValidationError } from '../core/index.js';

export function encodeCursor(parts: unknown[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

/**
 * A cursor's parts. A cursor is base64url JSON a caller may forge, and the API's text guard sees
 * only its encoding: one decoding to text PostgreSQL refuses (U+0000, an unpaired surrogate) is
 * refused here, like any cursor this server did not issue.
 */
export function decodeCursor(cursor: string): unknown[] {
  try {
    const parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(parts) && badTextAt(parts) === null) return parts;
  } catch {
    // fall through
  }
  throw notIssued();
}

/** The refusal of a cursor this server did not issue. */
export function notIssued(): ValidationError {
  return new ValidationError('cursor is not one this server issued', { field: 'cursor' });
}
