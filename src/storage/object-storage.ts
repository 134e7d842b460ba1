// Where an S3-compatible bucket is and how to reach it: the settings of the registry's blob
// store in production (AWS S3, MinIO, Ceph RGW, R2, ...), shared by configuration and the store.

export interface ObjectStorageSettings {
  /** for S3-compatible servers (e.g. http://127.0.0.1:9000); AWS's endpoint for the region when absent */
  endpoint?: string;
  region: string;
  bucket: string;
  /** key prefix, e.g. "bulwark/" (a missing trailing "/" is added) */
  prefix?: string;
  /** both or neither; neither uses the SDK's default credential chain (env, profile, role) */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** `<endpoint>/<bucket>/<key>` rather than `<bucket>.<endpoint>/<key>`; most self-hosted servers want it */
  forcePathStyle?: boolean;
}
