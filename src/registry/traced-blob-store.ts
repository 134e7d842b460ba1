// A blob store whose every call within a traced request is a span (`blob_store.<call>`), with the
// store's kind and the digest it names (content addresses, nothing secret; upload ids are left
// out: they are what a client holds to continue an upload). Installed only when tracing is on.
import type { Readable } from "node:stream";
import { SpanKind, inSpan, inTrace, type Attributes } from "../platform/tracing.js";
import type { AppendOptions, BlobStore, ByteRange } from "./storage/blob-store.js";

export function tracedBlobStore(store: BlobStore): BlobStore {
  // S3 is a remote service; the filesystem is this process's own work.
  const kind = store.kind === "filesystem" ? SpanKind.INTERNAL : SpanKind.CLIENT;
  const call = <T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> =>
    inTrace()
      ? inSpan(`blob_store.${name}`, { kind, attributes: { "bulwark.blob_store.kind": store.kind, ...attributes } }, fn)
      : fn();
  return {
    kind: store.kind,
    appendUpload: (uploadId: string, offset: number, body: Readable, options?: AppendOptions) =>
      call("appendUpload", { "bulwark.blob.offset": offset }, () =>
        store.appendUpload(uploadId, offset, body, options),
      ),
    // A stream, answered at once: its reading is the caller's.
    readUpload: (uploadId: string, size: number) => store.readUpload(uploadId, size),
    commitUpload: (uploadId: string, digest: string, size: number) =>
      call("commitUpload", { "bulwark.blob.digest": digest, "bulwark.blob.size": size }, () =>
        store.commitUpload(uploadId, digest, size),
      ),
    deleteUpload: (uploadId: string) => call("deleteUpload", {}, () => store.deleteUpload(uploadId)),
    listUploads: () => store.listUploads(),
    has: (digest: string) => call("has", { "bulwark.blob.digest": digest }, () => store.has(digest)),
    open: (digest: string, range?: ByteRange) =>
      call(
        "open",
        { "bulwark.blob.digest": digest, ...(range ? { "bulwark.blob.range_start": range.start } : {}) },
        () => store.open(digest, range),
      ),
    delete: (digest: string) => call("delete", { "bulwark.blob.digest": digest }, () => store.delete(digest)),
    close: () => store.close(),
  };
}
