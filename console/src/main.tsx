// The console's entry: renders the shell into the page (console/index.html).
import { createRoot } from "react-dom/client";
import { App } from "./app";
import "./styles.css";

createRoot(document.getElementById("root")!).render(<App />);
