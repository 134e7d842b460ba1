// The images module's public face: the only file of it that code outside it (server/, cli/)
// imports (test/architecture.test.ts).
export { imagesModule, type ImagesExports } from "./module.js";
export type { ImagesSettings } from "./settings.js";
