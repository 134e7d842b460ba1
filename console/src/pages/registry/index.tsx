// The registry area of the console: its pages and navigation entries.
import type { Area } from "../types";
import { ImagePage } from "./image";
import { RepoPage } from "./repo";
import { ReposPage } from "./repos";

export const registryArea: Area = {
  routes: [
    { path: "/console/repos", render: () => <ReposPage /> },
    { path: "/console/repo", render: () => <RepoPage /> },
    { path: "/console/image", render: () => <ImagePage /> },
  ],
  nav: [{ section: "Registry", label: "Repositories", to: "/console/repos", keepsGroup: true }],
};
