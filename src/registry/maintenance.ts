// RegistryMaintenanceService (bulwark.registry.v1, a documented extension): a garbage collection
// on demand, for the platform operator (the authorizer's rule for a method without a scope). It
// runs the module's one collection, the schedule's; a second at once is refused with ABORTED.
import { create } from "@bufbuild/protobuf";
import { durationFromMs, type Duration } from "@bufbuild/protobuf/wkt";
import { CollectGarbageResponseSchema, RegistryMaintenanceService } from "../gen/bulwark/registry/v1/maintenance_pb.js";
import { Code, ConnectError, invalidArgument } from "../core/errors.js";
import { bindService } from "../core/service.js";
import { CollectionRunningError, type GcReport } from "./gc.js";

/** The longest Duration the type allows (google/protobuf/duration.proto): about 10,000 years. */
const MAX_DURATION_SECONDS = 315_576_000_000n;
const NANOS_PER_MILLI = 1_000_000;

/** A grace window as milliseconds (nanoseconds rounded up, so nothing younger than asked goes). */
function graceMillis(grace: Duration): number {
  const { seconds, nanos } = grace;
  // A Duration's nanos are within ±999,999,999 and carry the sign of its seconds.
  const valid =
    Math.abs(nanos) <= 999_999_999 &&
    !(seconds > 0n && nanos < 0) &&
    !(seconds < 0n && nanos > 0) &&
    seconds <= MAX_DURATION_SECONDS;
  if (!valid) throw invalidArgument({ field: "grace", description: "is not a valid Duration" });
  if (seconds < 0n || nanos < 0) throw invalidArgument({ field: "grace", description: "must be at least 0s" });
  return Number(seconds) * 1000 + Math.ceil(nanos / NANOS_PER_MILLI);
}

export interface RegistryMaintenanceDeps {
  /** the registry module's collection (RegistryExports.collectGarbage) */
  collectGarbage(options: { dryRun?: boolean; graceMs?: number }): Promise<GcReport>;
  /** the grace window when the request names none */
  defaultGraceMs: number;
}

export function registryMaintenanceService({ collectGarbage, defaultGraceMs }: RegistryMaintenanceDeps) {
  return bindService(RegistryMaintenanceService, {
    async collectGarbage(req) {
      const graceMs = req.grace ? graceMillis(req.grace) : defaultGraceMs;
      let report: GcReport;
      try {
        report = await collectGarbage({ dryRun: req.dryRun, graceMs });
      } catch (err) {
        if (err instanceof CollectionRunningError)
          throw new ConnectError(`${err.message}: try again once it has finished`, Code.Aborted);
        throw err;
      }
      return create(CollectGarbageResponseSchema, {
        dryRun: req.dryRun,
        grace: durationFromMs(graceMs),
        manifests: BigInt(report.manifests),
        blobLinks: BigInt(report.blobLinks),
        blobs: BigInt(report.blobs),
        bytes: BigInt(report.bytes),
        uploads: BigInt(report.uploads),
      });
    },
  });
}
