"""Built-in plugins: core features registered through the same hooks as any third-party plugin."""
