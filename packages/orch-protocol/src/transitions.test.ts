import { describe, expect, test } from 'vitest';
import {
  AGENT_VM_STATES,
  AGENT_VM_TRANSITIONS,
  allowedSources,
  canTransition,
  ENVIRONMENT_STATES,
  ENVIRONMENT_TRANSITIONS,
  SNAPSHOT_STATES,
  SNAPSHOT_TRANSITIONS,
  type TransitionTable,
} from './index.js';

const machines: [string, TransitionTable<string>, readonly string[], string][] = [
  ['environment', ENVIRONMENT_TRANSITIONS, ENVIRONMENT_STATES, 'creating'],
  ['snapshot', SNAPSHOT_TRANSITIONS, SNAPSHOT_STATES, 'creating'],
  ['agent VM', AGENT_VM_TRANSITIONS, AGENT_VM_STATES, 'creating'],
];

describe.each(machines)('the %s state machine', (_name, table, states, initial) => {
  test('has a row for every state, names only known states, and reaches every state from the start', () => {
    expect(Object.keys(table).sort()).toEqual([...states].sort());
    for (const to of Object.values(table).flat()) expect(states).toContain(to);
    const seen = new Set([initial]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const s of [...seen])
        for (const t of table[s]!) if (!seen.has(t)) grew = seen.add(t) !== undefined;
    }
    expect([...seen].sort()).toEqual([...states].sort());
  });
});

describe('transitions the diagrams do not draw are refused', () => {
  test('final environment states stay final: stopped never becomes error (the reconciler bug)', () => {
    expect(canTransition(ENVIRONMENT_TRANSITIONS, 'stopped', 'error')).toBe(false);
    expect(canTransition(ENVIRONMENT_TRANSITIONS, 'error', 'running')).toBe(false);
    expect(() => allowedSources(ENVIRONMENT_TRANSITIONS, ['creating', 'stopped'], 'error')).toThrow(
      /illegal state transition: stopped -> error/,
    );
    expect(allowedSources(ENVIRONMENT_TRANSITIONS, ['creating', 'running'], 'error')).toEqual([
      'creating',
      'running',
    ]);
  });

  test('a snapshot is restored only from ready, and deleted only from ready or error', () => {
    expect(canTransition(SNAPSHOT_TRANSITIONS, 'error', 'restoring')).toBe(false);
    expect(canTransition(SNAPSHOT_TRANSITIONS, 'creating', 'deleting')).toBe(false);
    expect(canTransition(SNAPSHOT_TRANSITIONS, 'ready', 'restoring')).toBe(true);
  });
});
