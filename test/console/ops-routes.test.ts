/** The console's Notifications routes (issue 22, operator features, item 5). */
import { describe, expect, test } from 'vitest';
import { notificationHref, parseRoute } from '../../src/console/routes.js';

describe('notification routes', () => {
  test('the list, one by name, and a name with characters to encode', () => {
    expect(parseRoute('#/notifications')).toEqual({ page: 'notifications' });
    expect(parseRoute('#/notifications/ops')).toEqual({ page: 'notification', id: 'ops' });
    expect(parseRoute(notificationHref('a.b:c'))).toEqual({ page: 'notification', id: 'a.b:c' });
  });
});
