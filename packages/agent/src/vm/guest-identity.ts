import { randomBytes } from 'node:crypto';

/**
 * A fresh identity for a VM restored from a live snapshot. Clones of one snapshot resume with the
 * same guest memory: the kernel's CRNG state (so `/dev/urandom` gives every clone the same bytes, and
 * `boot_id`, generated from it on first read, the same value), the MAC address and the hostname of
 * the VM the snapshot was taken from.
 *
 * QEMU's `vmgenid` device is the standard answer (the guest kernel reseeds when its generation id
 * changes), but it cannot work here, measured: QEMU 7.2 accepts `-device vmgenid` on `microvm` but
 * builds its ACPI table only on pc/q35 (no `VMGENCTR` device appears in the guest), and the Debian
 * cloud kernel is built without the driver (`CONFIG_VIRT_DRIVERS` unset). So the host does it over
 * the guest channel right after `cont`, before the VM is reported running:
 *
 * 1. writes 64 bytes from the host's CSPRNG to the guest's `/dev/urandom` (mixed into the input pool),
 * 2. runs {@link reseedElf} (ioctl `RNDRESEEDCRNG`): the CRNG rekeys from that pool at once (a write
 *    alone would wait for the next periodic reseed, up to 60 s),
 * 3. sets the NIC's MAC to the VM's own (`ip link set dev eth0 address`; virtio-net passes it to
 *    QEMU; `arp_notify` makes the kernel announce it, so user-mode networking forwards to it),
 * 4. sets the hostname to the VM id, as a cold boot does.
 */
export function reidentifyScript(vmId: string, mac: string): string {
  if (!/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/.test(mac)) throw new Error(`bad MAC address ${mac}`);
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(vmId)) throw new Error(`bad VM id ${vmId}`);
  const B = '/orch/bin/busybox';
  return [
    'set -e',
    `printf %s ${randomBytes(64).toString('base64')} | ${B} base64 -d > /dev/urandom`,
    `printf %s ${reseedElf().toString('base64')} | ${B} base64 -d > /run/orch/reseed`,
    `${B} chmod 700 /run/orch/reseed`,
    '/run/orch/reseed',
    `${B} rm -f /run/orch/reseed`,
    'echo 1 > /proc/sys/net/ipv4/conf/eth0/arp_notify',
    `${B} ip link set dev eth0 address ${mac}`,
    `${B} hostname ${vmId}`,
    '',
  ].join('\n');
}

/** A random MAC address for a new VM: QEMU's locally administered prefix 52:54:00, then 3 random bytes. */
export function randomMac(): string {
  return ['52', '54', '00', ...[...randomBytes(3)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

/**
 * The x86-64 code of the reseed program (72 bytes, position independent; `as` + `objdump`):
 *
 *   lea  rdi, [rip+0x34]   ; "/dev/urandom"
 *   mov  esi, 1            ; O_WRONLY
 *   mov  eax, 2            ; open
 *   syscall
 *   test eax, eax
 *   js   fail
 *   mov  edi, eax
 *   mov  esi, 0x5207       ; RNDRESEEDCRNG = _IO('R', 0x07)
 *   xor  edx, edx
 *   mov  eax, 16           ; ioctl
 *   syscall
 *   test eax, eax
 *   jnz  fail
 *   xor  edi, edi          ; exit(0)
 *   jmp  done
 * fail:
 *   mov  edi, 1            ; exit(1)
 * done:
 *   mov  eax, 60           ; exit
 *   syscall
 *   .asciz "/dev/urandom"
 */
const RESEED_CODE = Buffer.from(
  [
    '488d3d34000000be01000000b8020000000f0585c0781889',
    'c7be0752000031d2b8100000000f0585c0750431ffeb05bf',
    '01000000b83c0000000f052f6465762f7572616e646f6d00',
  ].join(''),
  'hex',
);

/**
 * A static x86-64 Linux executable that asks the kernel to reseed its CRNG now (`RNDRESEEDCRNG` on
 * `/dev/urandom`; needs root) and exits 0, or 1 when the kernel refuses. No busybox applet can make
 * this ioctl, and it is sent over the guest channel, so any image can run it. Built here from
 * {@link RESEED_CODE}: one ELF header, one loadable segment, the code.
 */
export function reseedElf(): Buffer {
  const base = 0x400000n;
  const headers = 64 + 56;
  const size = BigInt(headers + RESEED_CODE.length);
  const elf = Buffer.alloc(headers);
  Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]).copy(elf, 0); // ELF, 64-bit, little-endian, v1, SysV
  elf.writeUInt16LE(2, 16); // e_type: EXEC
  elf.writeUInt16LE(0x3e, 18); // e_machine: x86-64
  elf.writeUInt32LE(1, 20); // e_version
  elf.writeBigUInt64LE(base + BigInt(headers), 24); // e_entry: the code, right after the headers
  elf.writeBigUInt64LE(64n, 32); // e_phoff
  elf.writeUInt16LE(64, 52); // e_ehsize
  elf.writeUInt16LE(56, 54); // e_phentsize
  elf.writeUInt16LE(1, 56); // e_phnum
  elf.writeUInt32LE(1, 64); // p_type: LOAD
  elf.writeUInt32LE(5, 68); // p_flags: R+X
  elf.writeBigUInt64LE(0n, 72); // p_offset: the whole file...
  elf.writeBigUInt64LE(base, 80); // p_vaddr
  elf.writeBigUInt64LE(base, 88); // p_paddr
  elf.writeBigUInt64LE(size, 96); // p_filesz
  elf.writeBigUInt64LE(size, 104); // p_memsz
  elf.writeBigUInt64LE(0x1000n, 112); // p_align
  return Buffer.concat([elf, RESEED_CODE]);
}
