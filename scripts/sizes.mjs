#!/usr/bin/env node
// The size of the code: the largest files (lines, as `wc -l` counts them) and the largest functions
// and methods (lines from their first token to their closing brace, found with the TypeScript
// compiler API) of the TypeScript under the given folders (default `src`; `.d.ts` and `.test.ts`
// left out). With `--max-file` or `--max-function`, it then lists what is over the limit and exits
// 1 if anything is.
//
//   node scripts/sizes.mjs [folder…] [--top 20] [--max-file 400] [--max-function 80]
//   npm run sizes -- --max-file 400 --max-function 80
//
// A nested function counts on its own and inside the function around it. Names say where a function
// is: `Class.method`, `outer.inner`, and `outer.<callback>` for an anonymous function passed as an
// argument.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

const USAGE = 'usage: sizes.mjs [folder…] [--top N] [--max-file LINES] [--max-function LINES]';

/** The command line as `{ folders, top, maxFile, maxFunction }`; throws a usage error on a bad one. */
export function parseArgs(argv) {
  const options = { folders: [], top: 20, maxFile: null, maxFunction: null };
  const names = { '--top': 'top', '--max-file': 'maxFile', '--max-function': 'maxFunction' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg in names) {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value < 1)
        throw new Error(`${arg} needs a whole number above 0\n${USAGE}`);
      options[names[arg]] = value;
    } else if (arg.startsWith('-')) {
      throw new Error(`unknown option ${arg}\n${USAGE}`);
    } else {
      options.folders.push(arg);
    }
  }
  if (options.folders.length === 0) options.folders.push('src');
  return options;
}

/** The `.ts` and `.tsx` files under `dir` (relative to `cwd`), sorted, without declarations and tests. */
function sourceFiles(dir, cwd) {
  if (statSync(path.resolve(cwd, dir)).isFile()) return [dir];
  return readdirSync(path.resolve(cwd, dir), { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return sourceFiles(full, cwd);
      const wanted = /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') && !/\.test\.tsx?$/.test(e.name);
      return wanted ? [full] : [];
    });
}

/** Lines as `wc -l` counts them: newline characters. */
const lineCount = (text) => (text.match(/\n/g) ?? []).length;

/** A name for a declaration's own name node, when it has one a reader would recognise. */
function ownName(node) {
  const name = node.name;
  if (name && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name)))
    return name.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  // `const f = () => …`, `{ key: function () … }`, `x.y = () => …`
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isBinaryExpression(parent) && ts.isPropertyAccessExpression(parent.left))
    return parent.left.name.text;
  return null;
}

const isFunctionLike = (node) =>
  ts.isFunctionDeclaration(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node) ||
  ts.isArrowFunction(node) ||
  ts.isFunctionExpression(node);

/** Every function of one file with its qualified name, first line and length in lines. */
export function functionsOf(file, text) {
  const source = ts.createSourceFile(
    file,
    text,
    ts.ScriptTarget.Latest,
    true,
    file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
  );
  const found = [];
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node, scope) => {
    let inner = scope;
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      inner = [...scope, node.name?.text ?? '<class>'];
    } else if (isFunctionLike(node) && node.body) {
      const name = [...scope, ownName(node) ?? '<callback>'].join('.');
      const first = lineOf(node.getStart(source));
      found.push({ file, name, line: first, lines: lineOf(node.getEnd()) - first + 1 });
      inner = [...scope, ownName(node) ?? '<callback>'];
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(source, []);
  return found;
}

/**
 * Files and functions of the folders (paths relative to `cwd`), each list largest first (ties by
 * path, then line).
 */
export function measure(folders, cwd = process.cwd()) {
  const files = [];
  const functions = [];
  for (const folder of folders) {
    for (const file of sourceFiles(folder, cwd)) {
      const text = readFileSync(path.resolve(cwd, file), 'utf8');
      files.push({ file, lines: lineCount(text) });
      functions.push(...functionsOf(file, text));
    }
  }
  files.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
  functions.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
  return { files, functions };
}

const fileRow = (f) => `${String(f.lines).padStart(6)}  ${f.file}`;
const functionRow = (f) => `${String(f.lines).padStart(6)}  ${`${f.file}:${f.line}`.padEnd(44)}  ${f.name}`;

/** The report as lines of text, and whether anything is over a limit. */
export function report({ files, functions }, options) {
  const where = options.folders.join(', ');
  const out = [
    `Largest files in ${where} (lines), top ${options.top} of ${files.length}:`,
    ...files.slice(0, options.top).map(fileRow),
    '',
    `Largest functions and methods in ${where} (lines), top ${options.top} of ${functions.length}:`,
    ...functions.slice(0, options.top).map(functionRow),
  ];
  let over = 0;
  if (options.maxFile !== null) {
    const big = files.filter((f) => f.lines > options.maxFile);
    over += big.length;
    out.push('', `Files over ${options.maxFile} lines: ${big.length}`, ...big.map(fileRow));
  }
  if (options.maxFunction !== null) {
    const big = functions.filter((f) => f.lines > options.maxFunction);
    over += big.length;
    out.push('', `Functions over ${options.maxFunction} lines: ${big.length}`, ...big.map(functionRow));
  }
  return { text: `${out.join('\n')}\n`, over };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  let options;
  let sizes;
  try {
    options = parseArgs(process.argv.slice(2));
    sizes = measure(options.folders);
  } catch (err) {
    process.stderr.write(`sizes: ${err.message}\n`);
    process.exit(2);
  }
  const { text, over } = report(sizes, options);
  // A reader that stops early (`| head`) is not an error.
  process.stdout.on('error', (err) => process.exit(err.code === 'EPIPE' ? process.exitCode : 2));
  process.stdout.write(text);
  process.exitCode = over > 0 ? 1 : 0;
}
