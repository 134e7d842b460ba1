// The events area of the console: its pages and navigation entries.
import type { Area } from "../types";

export const eventsArea: Area = { routes: [], nav: [] };
