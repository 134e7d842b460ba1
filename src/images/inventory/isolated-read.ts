// Reading an image's inventory in a thread of its own (node:worker_threads): the layers are
// untrusted, and decompressing and parsing them is synchronous work that could otherwise hold the
// server's event loop, or its whole heap. The thread has a heap of its own, capped, and the read a
// deadline: a read that passes either is stopped (the thread terminated) and recorded as the
// image's InventoryError.
//
// A thread that ended its read cleanly (an inventory, or an InventoryError or store failure it
// reported itself) reads the next image: starting one costs ~50 ms of CPU (its modules load
// again), more than reading a small image. One that missed its deadline, ran out of heap, died or
// was stopped is terminated, never reused. Idle threads end after IDLE_MS.
//
// The thread never opens the blob store itself: the server reads the blobs and SBOMs through the
// ImageSource it was given (the store stays behind its one abstraction, whatever backs it) and
// hands their bytes over as the thread asks for them, one chunk at a time, so the thread holds at
// most a chunk of each blob it reads.
import type { Readable } from "node:stream";
import { Worker } from "node:worker_threads";
import type { Answer, FromReader, ToReader } from "./read-protocol.js";
import type { AttachedSbom, ImageSource, InventoryLimits } from "./reader.js";
import { InventoryError, type Inventory } from "./types.js";

export interface IsolatedReadOptions {
  limits?: Partial<InventoryLimits>;
  /** how long one read may take before it is stopped and recorded as failed */
  deadlineMs: number;
  /** the reading thread's heap (V8's old generation), MiB */
  maxHeapMiB: number;
}

/** How long a thread that finished a read waits for the next before it ends. */
const IDLE_MS = 10_000;

let started = 0;
/** How many reading threads this process started (reads that reused one started none). */
export function readerThreadsStarted(): number {
  return started;
}

/** The reading thread: from the compiled modules (or the bundle), else from the sources through tsx. */
function startReader(maxHeapMiB: number): Worker {
  started++;
  const resourceLimits = { maxOldGenerationSizeMb: maxHeapMiB };
  if (!import.meta.url.endsWith(".ts"))
    return new Worker(new URL("./read-worker.js", import.meta.url), { resourceLimits });
  // Run from the TypeScript sources (the tests): the thread registers tsx before loading them.
  const tsx = import.meta.resolve("tsx/esm/api");
  const entry = new URL("./read-worker.ts", import.meta.url).href;
  const code = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(code, { eval: true, resourceLimits });
}

/** Threads that finished a read cleanly, by their heap limit, each with its idle timer. */
const idle = new Map<
  number,
  Array<{ worker: Worker; timer: NodeJS.Timeout; onExit: () => void; onError: () => void }>
>();

function takeReader(maxHeapMiB: number): Worker {
  const parked = idle.get(maxHeapMiB)?.pop();
  if (!parked) return startReader(maxHeapMiB);
  clearTimeout(parked.timer);
  parked.worker.off("exit", parked.onExit);
  parked.worker.off("error", parked.onError);
  parked.worker.ref();
  return parked.worker;
}

function parkReader(worker: Worker, maxHeapMiB: number): void {
  const list = idle.get(maxHeapMiB) ?? [];
  idle.set(maxHeapMiB, list);
  const forget = () => {
    const at = list.findIndex((p) => p.worker === worker);
    if (at >= 0) list.splice(at, 1);
  };
  const onExit = () => forget();
  // An idle thread that fails (work left over from its last read) is dropped, never reused, and
  // its error does not reach the process (a Worker's unheard 'error' would end it).
  const onError = () => {
    forget();
    void worker.terminate();
  };
  const timer = setTimeout(() => {
    forget();
    worker.off("exit", onExit);
    void worker.terminate();
  }, IDLE_MS);
  timer.unref();
  worker.on("exit", onExit);
  worker.on("error", onError);
  worker.unref(); // an idle reader keeps no process alive
  list.push({ worker, timer, onExit, onError });
}

/**
 * readInventory(source, limits) in a thread of its own. Ends like it (an Inventory, an
 * InventoryError, or the source's own error as it was thrown), and also in an InventoryError when
 * the read passes `deadlineMs`, runs out of its heap, or its thread dies; in an Error when
 * `source.signal` aborts it.
 */
export function readInventoryIsolated(source: ImageSource, options: IsolatedReadOptions): Promise<Inventory> {
  return new Promise<Inventory>((resolve, reject) => {
    if (source.signal?.aborted) return reject(new Error("the read was stopped"));
    const worker = takeReader(options.maxHeapMiB);
    const blobs = new Map<number, { stream: Readable; chunks: AsyncIterator<Uint8Array> }>();
    let sboms: AsyncIterator<AttachedSbom> | undefined;
    /** errors of the source, by number, to rethrow as they were */
    const sourceFailures: unknown[] = [];
    let settled = false;

    /** `reusable`: the thread itself ended the read, as it should (see the top). */
    const finish = (outcome: { inventory: Inventory } | { error: unknown }, reusable = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      source.signal?.removeEventListener("abort", onAbort);
      for (const { stream } of blobs.values()) stream.destroy();
      blobs.clear();
      void sboms?.return?.();
      worker.off("message", onWorkerMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
      if (reusable) parkReader(worker, options.maxHeapMiB);
      else void worker.terminate();
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
    source.signal?.addEventListener("abort", onAbort);

    const answer = (message: Answer, transfer: ArrayBuffer[] = []) => {
      if (!settled) worker.postMessage(message satisfies ToReader, transfer);
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
          return finish({ inventory: message.inventory }, true);
        case "failed":
          if (message.inventoryError !== undefined)
            return finish({ error: new InventoryError(message.inventoryError) }, true);
          if (message.source !== undefined) return finish({ error: sourceFailures[message.source] }, true);
          return fail(new Error(`reading the image failed: ${message.other}`));
      }
    };
    const onWorkerMessage = (message: FromReader) => {
      onMessage(message).catch((error: unknown) => {
        if ("id" in message) failure(message.id, error);
      });
    };
    const onError = (error: Error & { code?: string }) =>
      fail(
        error.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new InventoryError(`reading the image ran out of memory (the ${options.maxHeapMiB} MiB a read may use)`)
          : new InventoryError(`reading the image stopped: ${error.message}`),
      );
    const onExit = (code: number) =>
      fail(new InventoryError(`reading the image stopped: its thread ended (exit code ${code}) without an answer`));
    worker.on("message", onWorkerMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.postMessage({ read: { manifest: source.manifest, limits: options.limits ?? {} } } satisfies ToReader);
  });
}
