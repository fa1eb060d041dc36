#include <stdio.h>
int main(void) { puts("leash " LEASH_VERSION); return 0; }
