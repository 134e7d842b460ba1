// The reading thread (see isolated-read.ts): reads images' inventories one at a time with
// readInventory over a source whose blobs and SBOMs the server streams to it on request, and
// tells how each ended. The server hands it the next image only after a read that ended cleanly.
import { Readable } from "node:stream";
import { parentPort } from "node:worker_threads";
import type { Answer, FromReader, Question, ReadInput, ToReader } from "./read-protocol.js";
import { readInventory, type AttachedSbom, type ImageSource, type SbomBudget } from "./reader.js";
import { InventoryError } from "./types.js";

const port = parentPort!;

/** An error of the server's source, rethrown there as the original. */
class SourceFailure extends Error {
  constructor(
    message: string,
    readonly ref: number,
  ) {
    super(message);
  }
}

const send = (message: FromReader) => port.postMessage(message);

let lastId = 0;
const waiting = new Map<number, (answer: Answer) => void>();
port.on("message", (message: ToReader) => {
  if ("read" in message) return void read(message.read);
  // an answer to a question of an earlier read that is over is not waited for: dropped
  const resolve = waiting.get(message.id);
  waiting.delete(message.id);
  resolve?.(message);
});

type Asked = Question extends infer Q ? (Q extends { id: number } ? Omit<Q, "id"> : never) : never;

async function ask(question: Asked): Promise<Answer> {
  const id = ++lastId;
  const answered = new Promise<Answer>((resolve) => waiting.set(id, resolve));
  send({ ...question, id } as Question);
  const answer = await answered;
  if ("failure" in answer) throw new SourceFailure(answer.failure.message, answer.failure.ref);
  return answer;
}

let lastStream = 0;

/** A blob the server streams, one chunk per read. */
function remoteBlob(stream: number): Readable {
  return new Readable({
    read() {
      ask({ op: "pull", stream }).then(
        (answer) =>
          this.push(
            "chunk" in answer
              ? Buffer.from(answer.chunk.buffer, answer.chunk.byteOffset, answer.chunk.byteLength)
              : null,
          ),
        (error: unknown) => this.destroy(error as Error),
      );
    },
    destroy(error, done) {
      send({ op: "close", stream });
      done(error);
    },
  });
}

/** Reads one image and tells how it ended (questions and streams are numbered across reads). */
async function read(input: ReadInput): Promise<void> {
  // questions of an earlier read still unanswered are not waited for any more
  waiting.clear();
  const source: ImageSource = {
    manifest: input.manifest,
    async openBlob(digest) {
      const stream = ++lastStream;
      const answer = await ask({ op: "open", stream, digest });
      return "found" in answer && answer.found ? remoteBlob(stream) : undefined;
    },
    async *sboms(budget: SbomBudget): AsyncGenerator<AttachedSbom> {
      for (;;) {
        const answer = await ask({ op: "sbom", budget });
        if (!("sbom" in answer) || answer.sbom === null) return;
        yield answer.sbom;
      }
    },
  };
  try {
    send({ op: "done", inventory: await readInventory(source, input.limits) });
  } catch (error) {
    if (error instanceof InventoryError) send({ op: "failed", inventoryError: error.message });
    else if (error instanceof SourceFailure) send({ op: "failed", source: error.ref });
    else send({ op: "failed", other: error instanceof Error ? error.message : String(error) });
  }
}
