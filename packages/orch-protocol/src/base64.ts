/**
 * Base64 as the protocol carries it (`manifest_inline`, `stdin_base64`): the canonical form of
 * RFC 4648 section 4, exactly what `Buffer#toString('base64')` and `btoa` write. Standard alphabet
 * (`A-Z a-z 0-9 + /`; not base64url's `-` and `_`), padded with `=` to a multiple of four
 * characters, no whitespace or line breaks anywhere (not even the 76-column lines of MIME or of
 * the `base64` command: pass `-w0`), and the unused low bits of the last character zero, so that
 * one byte string has one spelling. Anything else is refused, never decoded "leniently": Node's
 * `Buffer.from(s, 'base64')` skips characters it does not know and stops at the first `=`, so
 * `"e30=garbage"` would decode to `{}`. Node-free: the dashboard runs it in the browser.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Canonical padded base64 but for the unused bits of the last character (see {@link base64Problem}). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The rule in words, the start of every {@link base64Problem}. */
export const BASE64_RULE = 'must be base64 (RFC 4648: A-Z a-z 0-9 + /, padded with =)';

/**
 * Why `text` is not canonical base64, as `must be base64 (...): <what is wrong, where>`, or
 * undefined when it is. The empty string is base64 (of no bytes).
 *
 * @example
 * base64Problem('e30=')      // undefined
 * base64Problem('e30=\n')    // 'must be base64 (...): it has a line break at character 5 (no whitespace is accepted)'
 * base64Problem('e31=')      // 'must be base64 (...): not canonical: the unused bits of "1" before the padding must be zero'
 */
export function base64Problem(text: string): string | undefined {
  if (BASE64.test(text)) {
    // Two "=": the last character's low 4 bits are unused; one "=": its low 2 bits.
    const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
    if (pad === 0) return undefined;
    const last = text[text.length - pad - 1] ?? 'A';
    const unused = pad === 2 ? 0b1111 : 0b11;
    return (ALPHABET.indexOf(last) & unused) === 0
      ? undefined
      : `${BASE64_RULE}: not canonical: the unused bits of ${JSON.stringify(last)} before the padding must be zero`;
  }
  const why = (what: string) => `${BASE64_RULE}: ${what}`;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? '';
    if (ALPHABET.includes(c) || c === '=') continue;
    const at = `at character ${i + 1}`;
    if (c === '\n' || c === '\r') return why(`it has a line break ${at} (no whitespace is accepted)`);
    if (/\s/.test(c)) return why(`it has whitespace ${at} (no whitespace is accepted)`);
    if (c === '-' || c === '_')
      return why(`it has ${JSON.stringify(c)} ${at}: that is base64url, not base64`);
    return why(`it has ${JSON.stringify(c)} ${at}, outside the alphabet`);
  }
  const firstPad = text.indexOf('=');
  if (firstPad >= 0 && (firstPad < text.length - 2 || !/^=+$/.test(text.slice(firstPad))))
    return why(`"=" pads only the end, but it is at character ${firstPad + 1}`);
  return why(`its length, ${text.length}, is not a multiple of 4 (is "=" padding missing?)`);
}

/**
 * The bytes `text` encodes, or undefined when it is not canonical base64 ({@link base64Problem}).
 *
 * @example decodeBase64('aGk=') // Uint8Array [104, 105]; decodeBase64('aGk') // undefined
 */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (base64Problem(text) !== undefined) return undefined;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
