#Requires -RunAsAdministrator
<#
.SYNOPSIS
Removes the edgeagent service and program.

.DESCRIPTION
Stops the service (running jobs drain first), removes it and its event log
source with "edgeagent.exe uninstall", and deletes C:\Program Files\edgeagent.
C:\ProgramData\edgeagent (configuration, state, logs) stays unless -Purge is
given.

.PARAMETER Purge
Also delete C:\ProgramData\edgeagent.
#>
[CmdletBinding()]
param(
    [switch]$Purge
)

$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest

$Name = 'edgeagent'
$ProgramDir = Join-Path $env:ProgramFiles $Name
$Exe = Join-Path $ProgramDir 'edgeagent.exe'
$DataDir = Join-Path $env:ProgramData $Name

if (Get-Service -Name $Name -ErrorAction SilentlyContinue) {
    if (Test-Path $Exe) {
        & $Exe uninstall
        if ($LASTEXITCODE -ne 0) {
            throw "edgeagent.exe uninstall failed with exit code $LASTEXITCODE"
        }
    } else {
        # The program is gone; remove the service by hand.
        sc.exe stop $Name | Out-Null
        sc.exe delete $Name
        if ($LASTEXITCODE -ne 0) {
            throw "sc.exe delete $Name failed with exit code $LASTEXITCODE"
        }
    }
}
if (Test-Path $ProgramDir) {
    Remove-Item -Recurse -Force $ProgramDir
}
if ($Purge -and (Test-Path $DataDir)) {
    Remove-Item -Recurse -Force $DataDir
    Write-Host "Removed $Name and $DataDir."
} else {
    Write-Host "Removed $Name. $DataDir (configuration, state, logs) stays; -Purge deletes it."
}
