// Reading an image's inventory in a thread of its own (node:worker_threads): the layers are
// untrusted, and decompressing and parsing them is synchronous work that could otherwise hold the
// server's event loop, or its whole heap. The thread has a heap of its own, capped, and the read a
// deadline: a read that passes either is stopped (the thread terminated) and recorded as the
// image's InventoryError.
//
// The thread never opens the blob store itself: the server reads the blobs and SBOMs through the
// ImageSource it was given (the store stays behind its one abstraction, whatever backs it) and
// hands their bytes over as the thread asks for them, one chunk at a time, so the thread holds at
// most a chunk of each blob it reads.
import type { Readable } from "node:stream";
import { Worker } from "node:worker_threads";
import type { Answer, FromReader, ReadInput } from "./read-protocol.js";
import type { AttachedSbom, ImageSource, InventoryLimits } from "./reader.js";
import { InventoryError, type Inventory } from "./types.js";

export interface IsolatedReadOptions {
  limits?: Partial<InventoryLimits>;
  /** how long one read may take before it is stopped and recorded as failed */
  deadlineMs: number;
  /** the reading thread's heap (V8's old generation), MiB */
  maxHeapMiB: number;
}

/** The reading thread: from the compiled modules (or the bundle), else from the sources through tsx. */
function startReader(input: ReadInput, maxHeapMiB: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: maxHeapMiB };
  if (!import.meta.url.endsWith(".ts"))
    return new Worker(new URL("./read-worker.js", import.meta.url), { workerData: input, resourceLimits });
  // Run from the TypeScript sources (the tests): the thread registers tsx before loading them.
  const tsx = import.meta.resolve("tsx/esm/api");
  const entry = new URL("./read-worker.ts", import.meta.url).href;
  const code = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(code, { eval: true, workerData: input, resourceLimits });
}

/**
 * readInventory(source, limits) in a thread of its own. Ends like it (an Inventory, an
 * InventoryError, or the source's own error as it was thrown), and also in an InventoryError when
 * the read passes `deadlineMs`, runs out of its heap, or its thread dies; in an Error when
 * `source.signal` aborts it.
 */
export function readInventoryIsolated(source: ImageSource, options: IsolatedReadOptions): Promise<Inventory> {
  return new Promise<Inventory>((resolve, reject) => {
    const worker = startReader({ manifest: source.manifest, limits: options.limits ?? {} }, options.maxHeapMiB);
    const blobs = new Map<number, { stream: Readable; chunks: AsyncIterator<Uint8Array> }>();
    let sboms: AsyncIterator<AttachedSbom> | undefined;
    /** errors of the source, by number, to rethrow as they were */
    const sourceFailures: unknown[] = [];
    let settled = false;

    const finish = (outcome: { inventory: Inventory } | { error: unknown }) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      source.signal?.removeEventListener("abort", onAbort);
      for (const { stream } of blobs.values()) stream.destroy();
      blobs.clear();
      void sboms?.return?.();
      void worker.terminate();
      if ("inventory" in outcome) resolve(outcome.inventory);
      else reject(outcome.error);
    };
    const fail = (error: unknown) => finish({ error });

    const deadline = setTimeout(
      () => fail(new InventoryError(`reading the image took longer than ${options.deadlineMs} ms (the limit)`)),
      options.deadlineMs,
    );
    deadline.unref();
    const onAbort = () => fail(new Error("the read was stopped"));
    if (source.signal?.aborted) return onAbort();
    source.signal?.addEventListener("abort", onAbort);

    const answer = (message: Answer, transfer: ArrayBuffer[] = []) => {
      if (!settled) worker.postMessage(message, transfer);
    };
    const failure = (id: number, error: unknown) => {
      sourceFailures.push(error);
      const message = error instanceof Error ? error.message : String(error);
      answer({ id, failure: { ref: sourceFailures.length - 1, message } });
    };

    const onMessage = async (message: FromReader): Promise<void> => {
      switch (message.op) {
        case "open": {
          const stream = await source.openBlob(message.digest);
          if (stream && settled) stream.destroy();
          else if (stream)
            blobs.set(message.stream, { stream, chunks: stream[Symbol.asyncIterator]() as AsyncIterator<Uint8Array> });
          return answer({ id: message.id, found: stream !== undefined });
        }
        case "pull": {
          const blob = blobs.get(message.stream);
          if (!blob) return answer({ id: message.id, end: true });
          const next = await blob.chunks.next();
          if (next.done) return answer({ id: message.id, end: true });
          // A copy of just this chunk (a store's chunk may be a view of a larger pooled buffer), moved, not cloned.
          const chunk = new Uint8Array(next.value);
          return answer({ id: message.id, chunk }, [chunk.buffer]);
        }
        case "close":
          blobs.get(message.stream)?.stream.destroy();
          blobs.delete(message.stream);
          return;
        case "sbom": {
          sboms ??= source.sboms(message.budget)[Symbol.asyncIterator]();
          const next = await sboms.next();
          if (next.done) return answer({ id: message.id, sbom: null });
          const content = new Uint8Array(next.value.content);
          return answer({ id: message.id, sbom: { artifactType: next.value.artifactType, content } }, [content.buffer]);
        }
        case "done":
          return finish({ inventory: message.inventory });
        case "failed":
          if (message.inventoryError !== undefined) return fail(new InventoryError(message.inventoryError));
          if (message.source !== undefined) return fail(sourceFailures[message.source]);
          return fail(new Error(`reading the image failed: ${message.other}`));
      }
    };
    worker.on("message", (message: FromReader) => {
      onMessage(message).catch((error: unknown) => {
        if ("id" in message) failure(message.id, error);
      });
    });
    worker.on("error", (error: Error & { code?: string }) =>
      fail(
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new InventoryError(`reading the image ran out of memory (the ${options.maxHeapMiB} MiB a read may use)`)
          : new InventoryError(`reading the image stopped: ${error.message}`),
      ),
    );
    worker.on("exit", (code) =>
      fail(new InventoryError(`reading the image stopped: its thread ended (exit code ${code}) without an answer`)),
    );
  });
}
