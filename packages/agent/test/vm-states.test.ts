/** A VM's record moves only as @orch/protocol's AGENT_VM_TRANSITIONS draws it. */
import { AGENT_VM_TRANSITIONS, type AgentVmState } from '@orch/protocol';
import { describe, expect, it } from 'vitest';
import { Vm, type VmRecord } from '../src/vm/vm.js';

const STATES = Object.keys(AGENT_VM_TRANSITIONS) as AgentVmState[];

function vmIn(state: AgentVmState): Vm {
  return new Vm({ id: 'vm-1', state } as VmRecord, '/nonexistent', 1 << 20);
}

describe('Vm.moveTo', () => {
  for (const from of STATES) {
    for (const to of STATES) {
      const allowed = from === to || AGENT_VM_TRANSITIONS[from].includes(to);
      it(`${from} -> ${to} is ${allowed ? 'allowed' : 'refused'}`, () => {
        const vm = vmIn(from);
        if (allowed) {
          vm.moveTo(to);
          expect(vm.record.state).toBe(to);
        } else {
          expect(() => vm.moveTo(to)).toThrow(`illegal state transition ${from} -> ${to}`);
          expect(vm.record.state).toBe(from);
        }
      });
    }
  }

  it('never leaves a final state', () => {
    for (const to of STATES.filter((s) => s !== 'stopped'))
      expect(() => vmIn('stopped').moveTo(to)).toThrow();
    for (const to of STATES.filter((s) => s !== 'error')) expect(() => vmIn('error').moveTo(to)).toThrow();
  });
});
