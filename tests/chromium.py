"""The flags every headless Chromium run of the page tests starts with (no GPU, no sandbox,
nothing fetched or synced behind the test's back)."""

HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
