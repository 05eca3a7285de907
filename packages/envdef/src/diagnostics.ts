import { printable } from './printable.js';

/** A position in the definition file, 1-based. */
export interface Position {
  readonly line: number;
  readonly col: number;
}

/** One problem found in a definition file, at the place a user has to change. */
export interface Diagnostic extends Position {
  readonly message: string;
}

/** The start of a file, used for problems that have no better place (an empty file). */
export const START: Position = { line: 1, col: 1 };

/**
 * Formats a diagnostic as the one-line `file:line:col: message` form the CLI prints. Messages quote
 * what the user wrote (an unknown key, a bad value), so control characters in it, and in the file
 * name, are shown escaped ({@link printable}): a diagnostic is always one line and shows all of it.
 *
 * @example
 * formatDiagnostic('orch.yaml', { line: 3, col: 5, message: 'unknown field "cpu"' })
 * // 'orch.yaml:3:5: unknown field "cpu"'
 */
export function formatDiagnostic(file: string, d: Diagnostic): string {
  return printable(`${file}:${d.line}:${d.col}: ${d.message}`);
}

/** Sorts diagnostics into reading order (line, then column), keeping insertion order on ties. */
export function sortDiagnostics(list: readonly Diagnostic[]): Diagnostic[] {
  return [...list].sort((a, b) => a.line - b.line || a.col - b.col);
}
