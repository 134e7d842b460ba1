// The events module's public face: the only file of events that code outside it imports.
export { eventsModule, type EventsExports } from "./module.js";
export type { EventsSettings } from "./settings.js";
