// The progress line of a long run (`sluicegate sim` and `sluicegate replay` on Node): on
// stderr when it is a terminal, once the run has taken a second, redrawn in place at most
// ten times a second, and cleared before the result is printed. The native command line
// draws the same line for `sim`.

/** How long a run goes before it shows its progress, in milliseconds. */
export const PROGRESS_AFTER_MS = 1000;
/** The least time between two draws, in milliseconds. */
export const PROGRESS_EVERY_MS = 100;

/** `n` with thousands separators (1,234,567). */
function grouped(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/**
 * What the line says: `sim: 1,234,567 of 3,000,000 requests (41 %)`; `sim: 1,234,567 rows
 * read` when the total is not known (a trace read as it streams); `sim (before): …` for a
 * side of a comparison.
 * @param {number} done
 * @param {number | null} total
 * @param {string} [side]
 * @returns {string}
 */
export function progressText(done, total, side = undefined) {
  const who = side === undefined ? "sim" : `sim (${side})`;
  if (total === null) return `${who}: ${grouped(done)} rows read`;
  const percent = Math.floor((done * 100) / Math.max(total, 1));
  return `${who}: ${grouped(done)} of ${grouped(total)} requests (${percent} %)`;
}

/**
 * What `replay`'s line says: `replay: 1,234 of 5,000 requests sent (24 %)`.
 * @param {number} done
 * @param {number | null} total
 * @returns {string}
 */
export function replayProgressText(done, total) {
  const percent = Math.floor((done * 100) / Math.max(total ?? done, 1));
  return `replay: ${grouped(done)} of ${grouped(total ?? done)} requests sent (${percent} %)`;
}

/**
 * The line to draw now, or null: null when stderr is not a terminal (`tty`), when the run
 * (`elapsedMs`) is younger than PROGRESS_AFTER_MS, or when the line was last drawn
 * (`lastDrawMs`, into the run; null: never) less than PROGRESS_EVERY_MS ago. `text` words
 * it (default: the simulator's).
 * @param {{ tty: boolean, elapsedMs: number, lastDrawMs: number | null, done: number, total: number | null, side?: string }} state
 * @param {(done: number, total: number | null, side?: string) => string} [text]
 * @returns {string | null}
 */
export function progressLine({ tty, elapsedMs, lastDrawMs, done, total, side = undefined }, text = progressText) {
  if (!tty || elapsedMs < PROGRESS_AFTER_MS) return null;
  if (lastDrawMs !== null && elapsedMs - lastDrawMs < PROGRESS_EVERY_MS) return null;
  return text(done, total, side);
}

/**
 * The progress line of a run starting now, on `stream`: `onProgress` (for the simulator's
 * options; undefined when `stream` is not a terminal, so that the run is not watched) and
 * `clear()`, which blanks the line if one was drawn.
 * @param {{ isTTY?: boolean, write(text: string): unknown }} [stream]
 * @param {() => number} [now] milliseconds
 * @param {(done: number, total: number | null, side?: string) => string} [text] the line's words (default: the simulator's)
 */
export function progressMeter(stream = process.stderr, now = () => performance.now(), text = progressText) {
  const tty = stream.isTTY === true;
  const start = now();
  let lastDrawMs = null;
  let width = 0; // the widest line drawn
  /** @param {number} done @param {number | null} total @param {string} [side] */
  const onProgress = (done, total, side = undefined) => {
    const elapsedMs = now() - start;
    const line = progressLine({ tty, elapsedMs, lastDrawMs, done, total, side }, text);
    if (line === null) return;
    // over the whole of a longer line drawn before
    stream.write(`\r${line.padEnd(width)}`);
    width = Math.max(width, line.length);
    lastDrawMs = elapsedMs;
  };
  return {
    onProgress: tty ? onProgress : undefined,
    clear() {
      if (width === 0) return;
      stream.write(`\r${" ".repeat(width)}\r`);
      width = 0;
    },
  };
}
