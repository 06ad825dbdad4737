/*
 * Stand-in bcryptprimitives.dll for Wine 8.0, which lacks it.
 *
 * Go 1.22+ programs on Windows import ProcessPrng from bcryptprimitives.dll
 * for their random numbers and die at start when it is missing. This
 * stand-in forwards to SystemFunction036 (RtlGenRandom) from advapi32,
 * which Wine does implement. Test-only: never ship it to a real Windows.
 *
 * Build: x86_64-w64-mingw32-gcc -O2 -shared -s -o bcryptprimitives.dll \
 *            bcryptprimitives.c -ladvapi32
 */
#include <windows.h>

/* RtlGenRandom is exported by advapi32 under this name. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* ProcessPrng fills buf with len random bytes and always reports success,
 * as the real one does; RtlGenRandom takes a ULONG, so larger requests are
 * served in chunks. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE buf, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(buf, n))
            return FALSE;
        buf += n;
        len -= n;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
    (void)inst; (void)reason; (void)reserved;
    return TRUE;
}
