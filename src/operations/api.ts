// The operations module's public face: the module, the backup route's path, and what `bulwark
// backup` and `bulwark restore` use of the archive format.
export { operationsModule, BACKUP_PATH } from "./module.js";
export { backupArchive, type BackupManifest } from "./archive.js";
export { restoreArchive, type RestoreOptions, type RestoreReport } from "./restore.js";
