// vela command-line entry point (placeholder until the CLI lands).
int main() { return 0; }
