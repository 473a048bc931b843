// What the keyed limiter and the token bucket say of a time or cost that is not a number
// (JS would otherwise turn null into 0, a free request, and "2" into 2).

/** The TypeError for the first of `[name, value]` pairs whose value is not a number. */
export function notNumber(...pairs) {
  const [name, value] = pairs.find(([, v]) => typeof v !== "number");
  return new TypeError(`${name} must be a number, got ${value === null ? "null" : typeof value}`);
}
