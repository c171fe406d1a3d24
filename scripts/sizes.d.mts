/** The types of scripts/sizes.mjs, for its test. */
export interface SizesOptions {
  folders: string[];
  top: number;
  maxFile: number | null;
  maxFunction: number | null;
}
export interface FileSize {
  file: string;
  lines: number;
}
export interface FunctionSize {
  file: string;
  name: string;
  line: number;
  lines: number;
}
export function parseArgs(argv: readonly string[]): SizesOptions;
export function functionsOf(file: string, text: string): FunctionSize[];
export function measure(
  folders: readonly string[],
  cwd?: string,
): { files: FileSize[]; functions: FunctionSize[] };
export function report(
  sizes: { files: FileSize[]; functions: FunctionSize[] },
  options: SizesOptions,
): { text: string; over: number };
