/** Builds unless dist/ already holds the build of the present inputs; true when it built. */
export function build(options?: { ifChanged?: boolean }): boolean;
/** The build inputs' fingerprint under `root` (a package root ending in "/"; default: this package). */
export function fingerprint(root?: string): string;
