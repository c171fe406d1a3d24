/** A value that follows another once it stops changing: what a search box sends, after typing pauses. */
import { useEffect, useState } from 'preact/hooks';

/** How long typing pauses before a search is sent, ms. */
export const SEARCH_PAUSE_MS = 300;

/** `value`, once it has not changed for `ms`. */
export function useSettled<T>(value: T, ms = SEARCH_PAUSE_MS): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}
