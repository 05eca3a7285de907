// What the page being shown holds open (a log stream, a timer), ended when the user leaves it.

let leaving: (() => void)[] = [];

/** Registers `fn` to run when the user leaves the page being shown (another page, or logging out). */
export function onLeave(fn: () => void): void {
  leaving.push(fn);
}

/** Ends what the page being shown holds open; the shell calls it before it shows another page. */
export function leavePage(): void {
  const fns = leaving;
  leaving = [];
  for (const fn of fns) fn();
}
