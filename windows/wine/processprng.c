/*
 * bcryptprimitives.dll for Wine 8.0, which lacks it: exports ProcessPrng,
 * which the Go runtime (1.24 and later) needs to start on Windows, and fills
 * the buffer through advapi32's SystemFunction036 (RtlGenRandom).
 *
 * For testing under Wine only; Windows 10 and later ship the real DLL.
 * Build and install into a Wine prefix (a copy beside the .exe is not
 * searched, since the DLL is a known system DLL):
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -s -o bcryptprimitives.dll processprng.c
 *   cp bcryptprimitives.dll "$WINEPREFIX/drive_c/windows/system32/"
 */
#include <windows.h>

typedef BOOLEAN(WINAPI *rtl_gen_random)(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	static rtl_gen_random gen;
	if (gen == NULL) {
		HMODULE advapi = LoadLibraryA("advapi32.dll");
		if (advapi == NULL)
			return FALSE;
		gen = (rtl_gen_random)GetProcAddress(advapi, "SystemFunction036");
		if (gen == NULL)
			return FALSE;
	}
	while (length > 0) {
		ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
		if (!gen(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	/* The real ProcessPrng always returns TRUE. */
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
	(void)instance;
	(void)reason;
	(void)reserved;
	return TRUE;
}
