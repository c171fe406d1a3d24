/** `text` as Biome formats a Markdown file at `file` (what `npm run format` leaves). */
export function formatMarkdown(text: string, file: string): string;
