/** What a call that must refuse its input threw: a `ValidationError`, for its message and details. */
import { expect } from 'vitest';
import { ValidationError } from '../../src/core/index.js';

export function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('did not throw');
}
