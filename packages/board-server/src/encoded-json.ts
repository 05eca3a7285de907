/**
 * A JSON value encoded ahead of time, in pieces: what a handler returns when it has encoded its
 * output while producing it (`query.execute` encodes rows chunk by chunk under its deadline and
 * byte limit). `rpc/app.ts` writes it into the envelope as it is. `T` is the type the text encodes.
 */
export class EncodedJson<T> {
  /** Phantom: the type the text encodes. */
  declare readonly encodes?: T;
  constructor(readonly parts: readonly Buffer[]) {}
}
