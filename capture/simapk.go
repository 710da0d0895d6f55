package capture

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"strconv"

	"github.com/edgeagent/edgeagent/protocol"
)

// The APKs a simulated phone installs (Simulated.InstallAPK, fakeadbd's
// `pm install`) are zip files like real ones, whose AndroidManifest.xml
// is plain XML where a real APK's is compiled to Android's binary XML:
// <manifest package="…" android:versionCode="…" android:versionName="…">.

// simManifest is the largest manifest a simulated phone reads.
const simManifest = 64 << 10

// SimAPK returns an APK of v for a simulated phone: a zip holding its
// AndroidManifest.xml and a classes.dex.
func SimAPK(v protocol.AppVersion) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("AndroidManifest.xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="%s" android:versionCode="%d" android:versionName="%s">
  <application android:label="%s"/>
</manifest>
`, html.EscapeString(v.Package), v.VersionCode, html.EscapeString(v.VersionName), html.EscapeString(v.Package))
	w, _ = zw.Create("classes.dex")
	_, _ = w.Write([]byte("dex\n035\x00"))
	_ = zw.Close()
	return buf.Bytes()
}

// ParseSimAPK reads the package and version of an APK SimAPK made, with
// the words of Android's package manager when it cannot.
func ParseSimAPK(b []byte) (protocol.AppVersion, error) {
	notAPK := func(why string) (protocol.AppVersion, error) {
		return protocol.AppVersion{}, fmt.Errorf("INSTALL_PARSE_FAILED_NOT_APK: Failed to parse APK: %s", why)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return notAPK("not a zip file")
	}
	for _, f := range zr.File {
		if f.Name != "AndroidManifest.xml" {
			continue
		}
		if f.UncompressedSize64 > simManifest {
			return notAPK("AndroidManifest.xml is too large")
		}
		rc, err := f.Open()
		if err != nil {
			return notAPK("AndroidManifest.xml cannot be read")
		}
		data, err := io.ReadAll(io.LimitReader(rc, simManifest+1))
		rc.Close()
		if err != nil || len(data) > simManifest {
			return notAPK("AndroidManifest.xml cannot be read")
		}
		var m struct {
			Package     string `xml:"package,attr"`
			VersionCode string `xml:"http://schemas.android.com/apk/res/android versionCode,attr"`
			VersionName string `xml:"http://schemas.android.com/apk/res/android versionName,attr"`
		}
		if err := xml.Unmarshal(data, &m); err != nil {
			return protocol.AppVersion{}, errors.New("INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: Failed to parse AndroidManifest.xml")
		}
		code, err := strconv.ParseInt(m.VersionCode, 10, 64)
		if m.Package == "" || err != nil || code < 1 {
			return protocol.AppVersion{}, errors.New("INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: <manifest> needs package and android:versionCode")
		}
		return protocol.AppVersion{Package: m.Package, VersionCode: code, VersionName: m.VersionName}, nil
	}
	return notAPK("no AndroidManifest.xml")
}
