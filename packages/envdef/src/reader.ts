/** The YAML walker validation runs on: resolves aliases, reports diagnostics with positions. */
import {
  type Alias,
  isAlias,
  isCollection,
  isMap,
  isScalar,
  isSeq,
  type Node,
  type Pair,
  visit,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import { CONTROL, MAX_ALIAS_RESOLUTIONS } from './definition.js';
import { type Diagnostic, type Position, START } from './diagnostics.js';
import type { ParsedSource } from './parse.js';
import { didYouMean } from './suggest.js';

export interface Field {
  readonly key: Node;
  readonly value: Node | null;
}

/** Walks the YAML tree, reporting every problem it finds and never stopping at the first. */
export class Reader {
  readonly diagnostics: Diagnostic[] = [];
  private aliasBudget = MAX_ALIAS_RESOLUTIONS;
  /** What each alias names, found in one walk of the document on the first alias. */
  private aliasTargets: Map<Alias, Node> | undefined;

  constructor(private readonly source: ParsedSource) {}

  at(node: Node | null | undefined, fallback: Position = START): Position {
    const offset = node?.range?.[0];
    return offset === undefined ? fallback : this.source.positionOf(offset);
  }

  report(where: Node | Position | null | undefined, message: string): void {
    const pos = where && 'line' in where ? where : this.at(where as Node | null | undefined);
    this.diagnostics.push({ line: pos.line, col: pos.col, message });
  }

  /** Follows an alias to the node it names (bounded, so a "billion laughs" file stays cheap). */
  resolve(node: Node | null | undefined): Node | null {
    let current: unknown = node ?? null;
    while (isAlias(current)) {
      if (--this.aliasBudget < 0) {
        if (this.aliasBudget === -1) this.report(current, `more than ${MAX_ALIAS_RESOLUTIONS} alias uses`);
        return null;
      }
      this.aliasTargets ??= aliasTargets(this.source);
      current = this.aliasTargets.get(current) ?? null;
    }
    return current as Node | null;
  }

  /**
   * The mapping's fields by name, reporting non-string, duplicate and (if `known` is given) unknown
   * keys. `place` completes "unknown field "x" ...", e.g. "at the top level" or "in resources".
   */
  fields(map: YAMLMap, place: string, known?: readonly string[]): Map<string, Field> {
    const out = new Map<string, Field>();
    for (const pair of map.items as Pair<Node, Node | null>[]) {
      const key = this.resolve(pair.key);
      if (!isScalar(key) || key.value === null || typeof key.value === 'object') {
        this.report(pair.key ?? pair.value ?? map, `a key ${place} is not a name`);
        continue;
      }
      const name = String(key.value);
      const first = out.get(name);
      if (first) {
        const p = this.at(first.key);
        this.report(key, `duplicate key "${name}" ${place} (first defined at ${p.line}:${p.col})`);
        continue;
      }
      if (known && !known.includes(name)) {
        const hint = didYouMean(name, known);
        const suffix = hint ? ` (did you mean "${hint}"?)` : `; known fields: ${known.join(', ')}`;
        this.report(key, `unknown field "${name}" ${place}${suffix}`);
        continue;
      }
      out.set(name, { key, value: this.resolve(pair.value) });
    }
    return out;
  }

  map(node: Node | null, where: string, at: Node | null): YAMLMap | undefined {
    if (isMap(node)) return node;
    this.report(node ?? at, `${where} must be a mapping, got ${describe(node)}`);
    return undefined;
  }

  seq(node: Node | null, where: string, at: Node | null): YAMLSeq | undefined {
    if (isSeq(node)) return node;
    this.report(node ?? at, `${where} must be a list, got ${describe(node)}`);
    return undefined;
  }

  string(node: Node | null, where: string, at: Node | null): string | undefined {
    if (isScalar(node) && typeof node.value === 'string') {
      if (node.value === '') this.report(node, `${where} must not be empty`);
      else if (CONTROL.test(node.value)) this.report(node, `${where} must not contain control characters`);
      else return node.value;
      return undefined;
    }
    this.report(node ?? at, `${where} must be a string, got ${describe(node)}`);
    return undefined;
  }

  integer(node: Node | null, where: string, at: Node | null, min: number, max: number): number | undefined {
    if (isScalar(node) && typeof node.value === 'number' && Number.isInteger(node.value)) {
      if (node.value >= min && node.value <= max) return node.value;
      this.report(node, `${where} ${node.value} is out of range: it must be from ${min} to ${max}`);
      return undefined;
    }
    this.report(node ?? at, `${where} must be an integer from ${min} to ${max}, got ${describe(node)}`);
    return undefined;
  }

  /** A scalar's text: strings as they are, numbers and booleans as written in the file. */
  text(node: Node | null): string | undefined {
    if (!isScalar(node)) return undefined;
    if (typeof node.value === 'string') return node.value;
    if (typeof node.value === 'number' || typeof node.value === 'boolean') {
      return (node as { source?: string }).source ?? String(node.value);
    }
    return undefined;
  }
}

/**
 * What each alias of the document names: the last node before it (in document order, a node
 * before its contents) with that anchor, as `Alias.resolve` finds it. That method walks the whole
 * document on every call, which made a thousand aliases in a large file take minutes.
 */
function aliasTargets(source: ParsedSource): Map<Alias, Node> {
  const anchors = new Map<string, Node>();
  const targets = new Map<Alias, Node>();
  visit(source.doc, {
    Node(_key, node) {
      if (isAlias(node)) {
        const target = anchors.get(node.source);
        if (target) targets.set(node, target);
      } else if ((isScalar(node) || isCollection(node)) && node.anchor) {
        anchors.set(node.anchor, node);
      }
    },
  });
  return targets;
}

/** A short description of what the user wrote, for "got ..." in messages. */
export function describe(node: Node | null): string {
  if (node === null) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    const v = node.value;
    if (v === null) return 'nothing';
    if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
    if (typeof v === 'number' || typeof v === 'boolean')
      return (node as { source?: string }).source ?? String(v);
  }
  return 'a value of another type';
}
