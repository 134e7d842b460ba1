// The console's entry: renders the shell into the page (console/index.html).
import { createRoot } from "react-dom/client";
import { App, PageBoundary } from "./app";
import "./styles.css";

// Around everything as well: the sign-in and the shell itself never fail to a blank page either.
createRoot(document.getElementById("root")!).render(
  <PageBoundary>
    <App />
  </PageBoundary>,
);
