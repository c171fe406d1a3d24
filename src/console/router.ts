/** The page the URL's hash names (`routes.ts`), as state that follows the hash. */
import { useEffect, useState } from 'preact/hooks';
import { parseRoute, type Route } from './routes.js';

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onHash = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return route;
}
